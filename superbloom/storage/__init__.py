"""storage/: on-disk formats (JSON, safetensors checkpoints, memory-mapped weights); imports nothing of ours."""
