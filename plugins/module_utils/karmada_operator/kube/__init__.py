"""The Kubernetes side: the client (``client``), conditions, kubeconfigs, applied-object digests, pod state."""
