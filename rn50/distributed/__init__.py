"""How a rank joins the others and tells which of them was lost (peers): the clusters' rank half
(the Lightning cluster environment and torch's process group of each cluster option) and the
peers of a failed collective. Imports torch; only a rank imports it."""
