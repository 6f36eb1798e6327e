"""An application that reports sensor readings with the telemetry protocol."""
