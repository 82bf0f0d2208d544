"""One module per `toolfork` subcommand: add_arguments(parser) and main(args) -> int."""
