"""The control plane's workloads and CRDs: component roll-outs, Karmada's CRDs."""
