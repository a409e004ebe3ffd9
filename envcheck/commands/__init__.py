"""One module per subcommand: ``main(options) -> int`` (the exit status), ``options`` its typed options."""
