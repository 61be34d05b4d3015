package demo

import (
	"hash/fnv"
	"log/slog"
	"time"
)

// The demo's namespaces when it shows several, as one emulator serves
// them (emulator.Config.Namespaces): two regions of one product.
const (
	NamespaceEU = "prod-eu"
	NamespaceUS = "prod-us"
)

// Namespaces lists the demo's namespaces, the default one first.
func Namespaces() []string { return []string{NamespaceEU, NamespaceUS} }

// usScale is prod-us's burst next to prod-eu's, and usInterval its pause
// between two trickle sends (prod-eu's is the default 1 s): a smaller,
// quieter region, so that the two namespaces differ at a glance.
const (
	usScale    = 0.4
	usInterval = 3 * time.Second
)

// ForNamespace adapts o to the traffic of the named namespace: its records
// carry namespace=name; a non-zero Seed is varied by the name, so that two
// namespaces given the same seed still fail differently; and, when o leaves
// them zero, prod-us sends a smaller burst than prod-eu and trickles at a
// third of its rate; and Namespace is name, so that the traffic matches
// how ProvisionNamespace set the region up (which cards its fraud check
// scores, whether its invoice archive is frozen). Dial the namespace's own
// connection string with the result:
//
//	for _, s := range emu.Servers() {
//		_ = demo.ProvisionNamespace(s.Namespace(), s.Name())
//		t, err := demo.Dial(s.ConnectionString(), demo.ForNamespace(s.Name(), opts))
//		...
//	}
func ForNamespace(name string, o Options) Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Logger = o.Logger.With("namespace", name)
	o.Namespace = name
	if o.Seed != 0 {
		h := fnv.New64a()
		h.Write([]byte(name))
		if o.Seed ^= h.Sum64(); o.Seed == 0 {
			o.Seed = 1
		}
	}
	if o.Scale == 0 && name == NamespaceUS {
		o.Scale = usScale
	}
	if o.Interval == 0 && name == NamespaceUS {
		o.Interval = usInterval
	}
	return o
}
