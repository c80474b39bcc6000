// xds-shim: relays Envoy's ADS stream (state of the world) to istiod, unchanged except that listeners and
// clusters lose the filters whose names are in -drop (by default Istio's own filters, which upstream Envoy
// does not have: istio.metadata_exchange, istio.alpn, istio.stats). Everything it drops is logged. For
// tests/istio only: istiod drives a stock Envoy (the gateway) through it. With -wasm-cache-dir it also
// does what istio-agent does to ECDS responses: pulls remote Wasm modules (oci://) with istio's own
// pkg/wasm and hands Envoy the local file (wasm.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttp "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

const (
	listenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	clusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	hcmType      = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	httpOptsKey  = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
)

var (
	drop   = map[string]bool{}
	logged sync.Map // what was dropped where, logged once
)

type shim struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	upstream discovery.AggregatedDiscoveryServiceClient
	wasm     *wasmConverter // nil: ECDS is relayed unchanged
}

func (s *shim) StreamAggregatedResources(down discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	ctx, cancel := context.WithCancel(down.Context())
	defer cancel()
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	}
	up, err := s.upstream.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	errc := make(chan error, 2)
	var sendMu sync.Mutex // Envoy's requests and the shim's NACKs (wasm.go) share the upstream stream
	send := func(req *discovery.DiscoveryRequest) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return up.Send(req)
	}
	go func() {
		for {
			req, err := down.Recv()
			if err != nil {
				errc <- err
				return
			}
			s.wasm.observeRequest(req)
			if err := send(req); err != nil {
				errc <- err
				return
			}
		}
	}()
	go func() {
		for {
			resp, err := up.Recv()
			if err != nil {
				errc <- err
				return
			}
			if err := rewrite(resp); err != nil {
				errc <- err
				return
			}
			if nack := s.wasm.convert(resp); nack != nil {
				if err := send(nack); err != nil {
					errc <- err
					return
				}
				continue
			}
			if err := down.Send(resp); err != nil {
				errc <- err
				return
			}
		}
	}()
	err = <-errc
	if err == io.EOF {
		return nil
	}
	return err
}

func note(kind, name, where, filter string) {
	key := kind + "/" + name + "/" + where + "/" + filter
	if _, seen := logged.LoadOrStore(key, true); !seen {
		log.Printf("dropped %s from %s %s (%s)", filter, kind, name, where)
	}
}

func rewrite(resp *discovery.DiscoveryResponse) error {
	for i, res := range resp.Resources {
		var msg proto.Message
		var changed bool
		var err error
		switch res.GetTypeUrl() {
		case listenerType:
			l := &listener.Listener{}
			if err = res.UnmarshalTo(l); err == nil {
				changed, err = rewriteListener(l)
			}
			msg = l
		case clusterType:
			c := &cluster.Cluster{}
			if err = res.UnmarshalTo(c); err == nil {
				changed, err = rewriteCluster(c)
			}
			msg = c
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", res.GetTypeUrl(), err)
		}
		if changed {
			a, err := anypb.New(msg)
			if err != nil {
				return err
			}
			resp.Resources[i] = a
		}
	}
	return nil
}

func rewriteListener(l *listener.Listener) (bool, error) {
	changed := false
	var lf []*listener.ListenerFilter
	for _, f := range l.ListenerFilters {
		if drop[f.GetName()] {
			note("listener", l.GetName(), "listener_filters", f.GetName())
			changed = true
			continue
		}
		lf = append(lf, f)
	}
	l.ListenerFilters = lf
	chains := l.FilterChains
	if l.DefaultFilterChain != nil {
		chains = append(chains[:len(chains):len(chains)], l.DefaultFilterChain)
	}
	for _, fc := range chains {
		var kept []*listener.Filter
		for _, f := range fc.Filters {
			if drop[f.GetName()] {
				note("listener", l.GetName(), "network filters of chain "+fc.GetName(), f.GetName())
				changed = true
				continue
			}
			if tc := f.GetTypedConfig(); tc != nil && tc.GetTypeUrl() == hcmType {
				h := &hcm.HttpConnectionManager{}
				if err := tc.UnmarshalTo(h); err != nil {
					return false, err
				}
				var hf []*hcm.HttpFilter
				for _, x := range h.HttpFilters {
					if drop[x.GetName()] {
						note("listener", l.GetName(), "http filters of chain "+fc.GetName(), x.GetName())
						continue
					}
					hf = append(hf, x)
				}
				if len(hf) != len(h.HttpFilters) {
					h.HttpFilters = hf
					a, err := anypb.New(h)
					if err != nil {
						return false, err
					}
					f.ConfigType = &listener.Filter_TypedConfig{TypedConfig: a}
					changed = true
				}
			}
			kept = append(kept, f)
		}
		fc.Filters = kept
	}
	return changed, nil
}

func rewriteCluster(c *cluster.Cluster) (bool, error) {
	changed := false
	var kept []*cluster.Filter
	for _, f := range c.Filters {
		if drop[f.GetName()] {
			note("cluster", c.GetName(), "upstream network filters", f.GetName())
			changed = true
			continue
		}
		kept = append(kept, f)
	}
	c.Filters = kept
	if a, ok := c.GetTypedExtensionProtocolOptions()[httpOptsKey]; ok {
		o := &upstreamhttp.HttpProtocolOptions{}
		if err := a.UnmarshalTo(o); err != nil {
			return false, err
		}
		var hf []*hcm.HttpFilter
		for _, x := range o.HttpFilters {
			if drop[x.GetName()] {
				note("cluster", c.GetName(), "upstream http filters", x.GetName())
				continue
			}
			hf = append(hf, x)
		}
		if len(hf) != len(o.HttpFilters) {
			o.HttpFilters = hf
			b, err := anypb.New(o)
			if err != nil {
				return false, err
			}
			c.TypedExtensionProtocolOptions[httpOptsKey] = b
			changed = true
		}
	}
	return changed, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:15011", "address Envoy's ADS cluster points at")
	upstream := flag.String("upstream", "127.0.0.1:15010", "istiod's plaintext xDS address (--grpcAddr)")
	names := flag.String("drop", "istio.metadata_exchange,istio.alpn,istio.stats", "filter names to drop, comma-separated")
	wasmDir := flag.String("wasm-cache-dir", "", "pull remote Wasm modules of ECDS responses into this folder and "+
		"hand Envoy the local file, as istio-agent does (istio.io/istio/pkg/wasm); empty: relay ECDS unchanged")
	wasmInsecure := flag.String("wasm-insecure-registries", "", "registries pulled without TLS verification "+
		"(istio-agent's WASM_INSECURE_REGISTRIES: host:port list or *); loopback registries are plain HTTP anyway")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	for _, n := range strings.Split(*names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			drop[n] = true
		}
	}
	conn, err := grpc.NewClient(*upstream, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<30)))
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(1 << 30))
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, &shim{upstream: discovery.NewAggregatedDiscoveryServiceClient(conn),
		wasm: newWasmConverter(*wasmDir, *wasmInsecure)})
	go func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
		<-ch
		srv.Stop()
	}()
	log.Printf("xds-shim: %s -> %s, dropping %s", lis.Addr(), *upstream, *names)
	if err := srv.Serve(lis); err != nil {
		log.Fatal(err)
	}
}
