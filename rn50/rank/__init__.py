"""The rank process (python -m rn50.rank, or this process under torchrun and SLURM): it imports
torch and Lightning, joins the others, builds the model, data and Trainer (run), trains for
accuracy (training), searches a batch size (batch_search) and tells a lost peer (peers)."""
