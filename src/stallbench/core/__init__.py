"""Small pieces every layer uses: errors, units, the journal, options, the run context."""
