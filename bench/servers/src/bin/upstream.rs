//! `bench-upstream [--listen ADDR]`: answers every request with the same small JSON-RPC result.

use std::sync::OnceLock;

fn main() -> std::io::Result<()> {
    static REPLY: OnceLock<Vec<u8>> = OnceLock::new();
    let reply: &'static [u8] = REPLY.get_or_init(|| {
        toolgate_bench_servers::response(200, "OK", "application/json", br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#)
    });
    let (listen, _) = toolgate_bench_servers::listen_arg();
    toolgate_bench_servers::serve(&listen, move |_req| reply)
}
