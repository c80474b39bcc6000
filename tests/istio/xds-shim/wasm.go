// The istio-agent's part of a gateway's Wasm path, for tests/istio/test_istio_install.py: with
// -wasm-cache-dir set, every ECDS response from istiod (type TypedExtensionConfig) goes through
// istio.io/istio/pkg/wasm's MaybeConvertWasmExtensionConfig with a wasm.LocalFileCache in that folder,
// the same function and cache the agent's xDS proxy uses (pkg/istio-agent/xds_proxy.go,
// rewriteAndForward), from the same istio.io/istio module version as the default istiod
// (tests/istio/releases.txt). So a WasmPlugin's `oci://` (or http(s)://) url, which istiod passes
// through as a remote data source, is pulled here (manifest digest checked against the url's @sha256:
// or the `sha256` field, layers against their descriptors, the Wasm magic number), written to
// <dir>/<sha256 of the module name>/<manifest digest>.wasm and handed to Envoy as a local file. A module
// that cannot be fetched or does not match becomes Istio's default filter: a deny-all RBAC filter for
// FAIL_CLOSE, allow-all for FAIL_OPEN. Only where even that fails is the response NACKed to istiod and
// not forwarded, as the agent does. Without -wasm-cache-dir nothing here runs (file:// urls, which istiod
// resolves itself, are all the other tests use).
//
// One difference from the agent: the agent converts in a goroutine and forwards the result when it is
// done, so other types' responses may overtake it; the shim converts in line, so the stream's order is
// kept and a slow pull holds the stream (the pulls here come from a registry on loopback).
package main

import (
	"fmt"
	"log"
	"strings"
	"sync/atomic"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	httpwasm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	"istio.io/istio/pkg/util/sets"
	"istio.io/istio/pkg/wasm"
)

const ecdsType = "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig"

// wasmConverter is nil when -wasm-cache-dir is not set.
type wasmConverter struct {
	cache wasm.Cache
	// The version of the last ECDS response Envoy accepted (the agent's ecdsLastAckVersion): a NACK
	// names it, as the agent's does.
	lastAck atomic.Value
}

func newWasmConverter(dir, insecure string) *wasmConverter {
	if dir == "" {
		return nil
	}
	opts := wasm.Options{InsecureRegistries: sets.New[string]()}
	for _, r := range strings.Split(insecure, ",") {
		if r = strings.TrimSpace(r); r != "" {
			opts.InsecureRegistries.Insert(r)
		}
	}
	c := &wasmConverter{cache: wasm.NewLocalFileCache(dir, opts)}
	c.lastAck.Store("")
	log.Printf("wasm: remote Wasm modules are pulled into %s (istio.io/istio/pkg/wasm), insecure registries %q", dir, insecure)
	return c
}

// observeRequest records Envoy's ECDS ACKs (a request without an error detail).
func (c *wasmConverter) observeRequest(req *discovery.DiscoveryRequest) {
	if c != nil && req.GetTypeUrl() == ecdsType && req.GetErrorDetail() == nil && req.GetResponseNonce() != "" {
		c.lastAck.Store(req.GetVersionInfo())
	}
}

// convert rewrites an ECDS response in place. It returns a NACK for istiod when the response must not
// be forwarded, nil otherwise (and for every other type).
func (c *wasmConverter) convert(resp *discovery.DiscoveryResponse) *discovery.DiscoveryRequest {
	if c == nil || resp.GetTypeUrl() != ecdsType {
		return nil
	}
	names := make([]string, len(resp.Resources))
	for i, r := range resp.Resources {
		names[i] = describe(r)
	}
	if err := wasm.MaybeConvertWasmExtensionConfig(resp.Resources, c.cache); err != nil {
		log.Printf("wasm: ECDS version %s NACKed, not forwarded: %v", resp.GetVersionInfo(), err)
		return &discovery.DiscoveryRequest{
			VersionInfo:   c.lastAck.Load().(string),
			TypeUrl:       resp.GetTypeUrl(),
			ResponseNonce: resp.GetNonce(),
			ErrorDetail:   &rpcstatus.Status{Code: int32(codes.Internal), Message: err.Error()},
		}
	}
	for i, r := range resp.Resources {
		if after := describe(r); after != names[i] {
			log.Printf("wasm: ECDS version %s: %s -> %s", resp.GetVersionInfo(), names[i], after)
		}
	}
	return nil
}

// describe names an ECDS resource and where its Wasm code comes from, for the log: `name: remote URL
// (sha256 X)`, `name: local FILE`, or `name: TYPE` for what is not a Wasm filter (the default filters).
func describe(a *anypb.Any) string {
	ec := &core.TypedExtensionConfig{}
	if err := a.UnmarshalTo(ec); err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	tc := ec.GetTypedConfig()
	w := &httpwasm.Wasm{}
	if tc.GetTypeUrl() != "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm" || tc.UnmarshalTo(w) != nil {
		return ec.GetName() + ": " + strings.TrimPrefix(tc.GetTypeUrl(), "type.googleapis.com/")
	}
	code := w.GetConfig().GetVmConfig().GetCode()
	if r := code.GetRemote(); r != nil {
		return fmt.Sprintf("%s: remote %s (sha256 %q)", ec.GetName(), r.GetHttpUri().GetUri(), r.GetSha256())
	}
	return fmt.Sprintf("%s: local %s", ec.GetName(), code.GetLocal().GetFilename())
}
