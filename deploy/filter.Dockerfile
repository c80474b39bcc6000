# The filter as the OCI image Istio pulls (WasmPlugin `url: oci://...`): a single layer with plugin.wasm.
# Build the module first: `make wasm` (target/wasm32-wasip1/release/toolgate_filter.wasm).
#   docker build -f deploy/filter.Dockerfile -t registry.example/toolgate-filter:0.1.0 .
FROM scratch
COPY target/wasm32-wasip1/release/toolgate_filter.wasm ./plugin.wasm
