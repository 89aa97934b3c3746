"""The results record every layer shares: a row's fields (rows.Row) and the results file's constants (schema).
It sits below the engine, the judges and the output, and imports none of them."""
