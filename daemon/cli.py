def main(argv: list[str] | None = None) -> int:
    raise NotImplementedError
