# What zsh offers at a TAB after the command line $1, one match a line, with the completion
# functions of the folder $2 on fpath: an interactive zsh on a pseudo-terminal (zpty) types
# the line and a TAB; compadd, wrapped, prints each match it is given.
zmodload zsh/zpty
zpty shell zsh -f -i
zpty -w shell "PS1= ; fpath=($2 \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w shell "zstyle ':completion:*' list-grouped false; zstyle ':completion:*' insert-tab false"
# The marks are spelled in two pieces: the terminal echoes these lines back.
zpty -w shell 'compadd () {
  if [[ ${@[1,(i)(-|--)]} == *-(O|A|D)\ * ]]; then builtin compadd "$@"; return $?; fi
  typeset -a __hits; builtin compadd -A __hits "$@"; local ret=$?
  (( $#__hits )) && print -r -l -- "<"MATCH">"${^__hits}
  return $ret
}'
zpty -w shell 'finish () { print -r -- "<"DONE">"; exit }'
zpty -w shell 'comppostfuncs=(finish)'
zpty -w shell "$1"$'\t'
local line
while zpty -r shell line; do
  [[ $line == *"<DONE>"* ]] && break
  [[ $line == *"<MATCH>"* ]] && print -r -- "${line##*<MATCH>}"
done
zpty -d shell
