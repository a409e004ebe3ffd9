"""One module per subcommand: ``main(args) -> int`` (the exit status)."""
