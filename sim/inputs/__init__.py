"""What a run is told: configs, hardware profiles, model specs, workloads, engine presets, layouts."""
