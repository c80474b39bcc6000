//! `bench-upstream [--listen ADDR] [--tools-list FILE]`: answers every request with the same small
//! JSON-RPC result; with `--tools-list`, a `tools/list` request (its `mcp-method` header, or without
//! that header its body's `"method":"tools/list"`) is answered with FILE's content instead (a
//! JSON-RPC response, `application/json` with its content-length): the list rows of `make bench`.

#![forbid(unsafe_code)]
use std::sync::OnceLock;

fn main() -> std::io::Result<()> {
    static REPLY: OnceLock<Vec<u8>> = OnceLock::new();
    static LIST_REPLY: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    let reply: &'static [u8] = REPLY.get_or_init(|| {
        toolgate_bench_servers::response(
            200,
            "OK",
            "application/json",
            br#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
        )
    });
    let (listen, args) = toolgate_bench_servers::listen_arg();
    let list_file = match args.as_slice() {
        [] => None,
        [flag, file] if flag == "--tools-list" => Some(std::fs::read(file)?),
        _ => {
            eprintln!("usage: bench-upstream [--listen ADDR] [--tools-list FILE]");
            std::process::exit(2);
        }
    };
    let list_reply: Option<&'static [u8]> = LIST_REPLY
        .get_or_init(|| {
            list_file
                .map(|body| toolgate_bench_servers::response(200, "OK", "application/json", &body))
        })
        .as_deref();
    toolgate_bench_servers::serve(&listen, move |req| match list_reply {
        Some(list) if is_tools_list(req) => list,
        _ => reply,
    })
}

/// A `tools/list` request: by its `mcp-method` header when it has one (every benchmark request
/// does), else by its body.
fn is_tools_list(req: &toolgate_bench_servers::Request<'_>) -> bool {
    match req.header("mcp-method") {
        Some(method) => method == b"tools/list",
        None => {
            let needle = br#""method":"tools/list""#;
            req.body.windows(needle.len()).any(|w| w == needle)
        }
    }
}
