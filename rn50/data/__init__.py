"""What a rank reads: torchvision's ImageFolder and the synthetic batch (modules), and DALI's
pipeline (dali, an optional dependency)."""
