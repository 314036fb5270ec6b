"""What a fact is: the ledger and fact formats, the checks and the gate every write passes."""
