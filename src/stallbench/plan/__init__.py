"""Plans: the run settings, the variants and each workload's options, read from TOML through
the option tables (the variants' own table is settings/)."""
