"""The output relay of `transcript-otel run`: a program that starts the command and copies its stdout.

It runs as its own small process (`python -I -S`, standard library only), so the copy
never waits for the interpreter lock of the process that maps and exports the
transcript. Its modules import nothing but the standard library and each other
(relatively), so that interpreter imports this package alone, as `relay`, from the
directory that holds it. It starts the command (`command`) and (`copy_loop`):

- copies every byte of the command's stdout to its own stdout (the caller's) as it
  comes, in large reads, with blocking writes: a slow reader slows the command exactly
  as a direct pipe would, and nothing is cut however slow the reader is;
- hands a copy to the capture side without ever waiting for it (`capture_copy`), on the
  data pipe (`DATA_FD`, the output as is): where both ends allow, the copy is made by the
  kernel (`tee(2)`, then `splice(2)` to our stdout: no byte passes through this process);
  what the capture side has not taken is held, up to `MAX_HELD_BYTES`; beyond that,
  output is dropped from the copy only, and reported as a gap at its offset in the copy;
- when its stdout is a terminal, runs the command on a pseudo-terminal (`pty` mode):
  the command sees a terminal of the same size (resized with ours), our terminal is put
  in raw mode while it runs and restored after (`terminal`; keystrokes pass through, so
  Ctrl-C and Ctrl-Z reach the command from its own terminal), and when the command stops
  (Ctrl-Z) our job stops too, for the shell to resume it with `fg`;
- reports on the report pipe (`REPORT_FD`): the command's pid, a failure to execute it,
  its exit status, the end of its output, and the gaps.

Reports are frames (`protocol`): a kind byte and a payload length (`HEADER`), then the
payload. A gap's report is written before any output that follows the gap, so the
capture side, which reads the reports it has before the output it reads, always knows of
a gap before it reads past it. The relay ignores the signals `transcript-otel run`
forwards: the wrapper forwards each to the command once.
"""
