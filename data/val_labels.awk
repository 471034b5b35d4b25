# Validation labels -> "CLASS<tab>FILE" lines, for data/prepare_imagenet_folder.sh. Reads three files: the
# training classes in sorted order (one a line), the files of the flat val folder (one a line), and the labels
# file, either ILSVRC's CSV ("ImageId,PredictionString", the class the first word of the prediction, the file
# ImageId plus any extension) or "FILE LABEL" lines, LABEL a class name or its index in the sorted classes.
# Exits 2 naming the labels file and line, or the val file, for anything that does not fit. Variables: labels
# (the labels file's name), val (the val folder's name), for the messages.
function fail(msg) {
  printf "prepare_imagenet_folder.sh: error: %s\n", msg >"/dev/stderr"
  failed = 1
  exit 2
}
FNR == 1 { part++ }
part == 1 { known[$0] = 1; by_index[n++] = $0; next }
part == 2 { file[$0] = 1; stem = $0; sub(/\.[^.]*$/, "", stem); by_stem[stem] = $0; next }
{ sub(/\r$/, "") }
FNR == 1 && /^ImageId,/ { csv = 1; next }
/^[ \t]*$/ { next }
{
  where = labels ":" FNR
  if (csv) {
    comma = index($0, ",")
    id = substr($0, 1, comma - 1)
    split(substr($0, comma + 1), words, " ")
    label = words[1]
    f = (id in by_stem) ? by_stem[id] : ""
    if (comma == 0 || id == "" || label == "") fail(where ": expected \"ImageId,CLASS ...\", not '" $0 "'")
    if (f == "") fail(where ": no " val "/" id ".* for ImageId " id)
  } else {
    if (NF != 2) fail(where ": expected \"FILE LABEL\", not '" $0 "'")
    f = $1
    label = $2
    if (!(f in file)) fail(where ": " val "/" f " not found")
  }
  if (!(label in known)) {
    if (label ~ /^[0-9]+$/ && label + 0 < n) label = by_index[label + 0]
    else fail(where ": '" label "' is neither a class folder of train/ nor a class index below " n)
  }
  if (f in labelled) fail(where ": " f " is labelled twice (also at line " labelled[f] ")")
  labelled[f] = FNR
  print label "\t" f
}
END {
  if (failed) exit 2
  for (f in file)
    if (!(f in labelled)) fail(val "/" f " has no label in " labels "; label every val image or remove it")
}
