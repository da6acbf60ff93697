"""NYU Depth V2 3D distance: the .mat reader, point pairs, prompt, answer parser, evaluation."""
