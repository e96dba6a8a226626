"""Running a plan: interleaved rounds, duets, monitors, --iterations auto, the guest side."""
