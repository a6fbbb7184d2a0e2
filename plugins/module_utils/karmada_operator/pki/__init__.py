"""Certificates: the PKI a Karmada needs, CA rotation phases, leaf roll-outs."""
