"""What binds the layers: state machines, trace validation, proofs, the command line and the gate."""
