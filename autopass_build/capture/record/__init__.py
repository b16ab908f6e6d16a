"""Record mode of the compiler wrapper: what one successful compile or link leaves in
the store (recorder, one_pass, archive), written through the spool (spool), and what a
recording that captured nothing says (unseen, skip_fixes)."""
