"""Client-operation streams: the trace format of DESIGN.md section 9 and seeded generators."""
