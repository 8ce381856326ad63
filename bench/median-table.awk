# median-table.awk — the table of interleaved benchmark rounds that
# bench/ab-small.sh, bench/ab-placement.sh and bench/device-paths.sh print: input lines
# "GROUP WHO KEY VALUE" (a collective, a build or path, a size, a time or
# bandwidth), one per round; output per GROUP and KEY the median
# [min-max] of each WHO, then the ratios of medians asked for.  With
# -v paired=1, each ratio also as the median [min-max] of its per-round
# ratios (the i-th values of both WHOs come from round i): the round's
# machine speed cancels, so a difference of a few per cent shows.
#
#   awk -v whos="before after mpi" -v ratios="after/before after/mpi" -f median-table.awk
function med(a, n,   i, j, t) {
  for (i = 1; i <= n; i++)
    for (j = i + 1; j <= n; j++)
      if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ key = $1 " " $3; n[key, $2]++; v[key, $2, n[key, $2]] = $4; keys[key] = 1 }
END {
  nw = split(whos, w, " ")
  nr = split(ratios, r, " ")
  for (key in keys) {
    split(key, k, " ")
    line = sprintf("%-10s %10d ", k[1], k[2])
    delete m
    for (i = 1; i <= nw; i++) {
      c = n[key, w[i]]
      if (c == 0) { line = line sprintf(" %-22s", "n/a"); continue }
      delete a; lo = 1e30; hi = 0
      for (j = 1; j <= c; j++) { a[j] = v[key, w[i], j]; if (a[j] < lo) lo = a[j]; if (a[j] > hi) hi = a[j] }
      m[w[i]] = med(a, c)
      line = line sprintf(" %-22s", sprintf("%.2f [%.2f-%.2f]", m[w[i]], lo, hi))
    }
    for (i = 1; i <= nr; i++) {
      split(r[i], p, "/")
      line = line sprintf(" %12s", m[p[2]] > 0 ? sprintf("%.2f", m[p[1]] / m[p[2]]) : "n/a")
    }
    for (i = 1; paired && i <= nr; i++) {
      split(r[i], p, "/")
      c = n[key, p[1]]
      if (c == 0 || c != n[key, p[2]]) { line = line sprintf(" %-22s", "n/a"); continue }
      delete a; lo = 1e30; hi = 0
      for (j = 1; j <= c; j++) {
        a[j] = v[key, p[2], j] > 0 ? v[key, p[1], j] / v[key, p[2], j] : 0
        if (a[j] < lo) lo = a[j]; if (a[j] > hi) hi = a[j]
      }
      line = line sprintf(" %-22s", sprintf("%.3f [%.2f-%.2f]", med(a, c), lo, hi))
    }
    print line
  }
}
