"""Plans and variants: the settings of a run, read from TOML through the option tables."""
