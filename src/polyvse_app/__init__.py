"""The application: the `polyvse` command line (cli.py, commands/) and the HTTP service (service/), thin layers
over the library (polyvse) and the trainer (polyvse_train)."""
