"""What a rank trains: the network and its LightningModule (model), optimizers and their
parameter groups, the learning-rate schedule, loss scalers, top-k accuracy, and
train=accuracy's module (accuracy_module)."""
