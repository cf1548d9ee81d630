"""The formats a plan is shipped in (``policy --format``), apart from :mod:`.policy_export` so that the command
line can list them without loading PyTorch."""

FORMATS = ("torch", "hf", "torchtitan")
"""torch: a torch-only Python file; hf: Hugging Face's checkpointing call; torchtitan: its settings."""
