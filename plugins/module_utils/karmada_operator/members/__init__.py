"""Member clusters: the member plan from the spec, joining and unjoining."""
