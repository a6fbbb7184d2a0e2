"""Time to generate the full PKI set of one KarmadaDeployment, and to re-check it (no-op reconcile).

Usage: python benchmarks/bench_pki.py [--repeat N]
Prints plain lines such as ``pki full-set RSA-3072: 2.41 s (median of 3)``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugins" / "module_utils"))

from karmada_operator.pki import pki as karmada_pki  # (after the path set-up above)

KEY_TYPES = (("RSA", 3072), ("ECDSA", 256))


def spec(algorithm: str, size: int) -> dict:
    """A production-like set: 3 etcd members, an external balancer, all components."""
    return {
        "namespace": "karmada-system",
        "name": "karmada",
        "etcd": {"replicas": 3},
        "apiServer": {
            "externalLoadBalancer": {"addresses": ["10.0.0.10"], "dnsNames": ["karmada.example.com"]}
        },
        "certificates": {"keyAlgorithm": algorithm, "keySize": size},
    }


def timed(func, repeat: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    for algorithm, size in KEY_TYPES:
        label = f"{algorithm}-{size}" if algorithm == "RSA" else f"ECDSA-P{size}"
        data = spec(algorithm, size)
        full, result = timed(lambda data=data: karmada_pki.reconcile_pki(data), args.repeat)
        files = result.files  # type: ignore[attr-defined]
        certs = len(result.certificates)  # type: ignore[attr-defined]
        print(f"pki full-set {label}: {full:.2f} s (median of {args.repeat}; {certs} certificates)")
        noop, again = timed(
            lambda data=data, files=files: karmada_pki.reconcile_pki(data, existing=files), args.repeat
        )
        assert not again.changes  # type: ignore[attr-defined]
        print(f"pki no-op reconcile {label}: {noop * 1000:.0f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
