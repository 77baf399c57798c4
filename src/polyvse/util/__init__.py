"""Small helpers every package may use: atomic writes (atomic), the data and cache roots (paths), names imported on
first use (lazy), progress bars (progress), numpy rows (arrays)."""
