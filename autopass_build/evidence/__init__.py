"""Reading the evidence a unit's code leaves: what the compiler did and missed (unit:
remarks, pipeline, IR, sizes), where the time goes (hotspots, inlined, bundled_copies,
layout_reach), what the hot code compiled to (codeshape), the functions, loops and calls
decisions can name (inventory), and names as people read them (symbol_names)."""
