"""``python -m pegboard`` runs the pegboard command."""

from .cli import main

__all__ = ("main",)

if __name__ == "__main__":
    main()
