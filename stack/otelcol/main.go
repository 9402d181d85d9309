// Command otelcol-openai-latency is the OpenTelemetry Collector distribution that the
// project's own collector configs (collector/*.yaml) need, and nothing else. It stands in for
// the otel/opentelemetry-collector-contrib image of the same release in `make stack-test`:
// every component here is the contrib distribution's module at that release.
//
// Built by scripts/build-stack.sh; the release is the one in go.mod (see docs/STACK.md).
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/otelcol"
)

// version is the collector release every component module is pinned to (go.mod).
// scripts/build-stack.sh overrides it with -ldflags "-X main.version=...".
var version = "0.143.0"

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{
			Command:     "otelcol-openai-latency",
			Description: "OpenTelemetry Collector with the components of openai-latency's configs",
			Version:     version,
		},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{
					envprovider.NewFactory(),
					fileprovider.NewFactory(),
					yamlprovider.NewFactory(),
				},
			},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		log.Fatal(err)
	}
}
