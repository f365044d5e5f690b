"""User tools beside the run's path, which nothing on it imports: the offline wheelhouse, the
node doctor, the bare training loop (baseline), and fake ImageNet trees."""
