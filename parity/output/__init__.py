"""What a user reads and tools parse: the declared row, the tables, notes and charts, and the results files."""
