// Regenerates cases.json from a checkout of https://github.com/http-tests/cache-tests:
//   node tests/integration/cache_tests/export.mjs /path/to/cache-tests COMMIT > cases.json
// Each upstream suite file (tests/*.mjs) builds its cases with small template functions; this
// evaluates them and writes the result as plain data, keeping the relevant suites only: those
// of RFC 9111 as a shared cache. Left out: cdn-cache-control (RFC 9213, a CDN's own field),
// interim (1xx responses, RFC 8297, not caching) and the cases marked browser_only.
import { readdirSync } from 'fs'
import { pathToFileURL } from 'url'

const [root, commit] = process.argv.slice(2)
const skipSuites = new Set(['cdn-cache-control', 'interim'])
const base = `https://github.com/http-tests/cache-tests/blob/${commit}/tests/`
const order = (await import(pathToFileURL(`${root}/tests/index.mjs`))).default.map(s => s.id)
const suites = []
for (const file of readdirSync(`${root}/tests`).filter(f => f.endsWith('.mjs') && f !== 'index.mjs')) {
  const suite = (await import(pathToFileURL(`${root}/tests/${file}`))).default
  if (skipSuites.has(suite.id)) continue
  suite.source = base + file
  suite.tests = suite.tests.filter(t => t.browser_only !== true)
  for (const t of suite.tests) t.source = suite.source
  suites.push(suite)
}
suites.sort((a, b) => order.indexOf(a.id) - order.indexOf(b.id))
// One line a case, so that a change upstream reads as a one-line diff here.
const out = ['{', ' "upstream": "https://github.com/http-tests/cache-tests",',
  ` "commit": ${JSON.stringify(commit)},`,
  ' "license": "BSD-3-Clause, Copyright (c) 2018, Mark Nottingham (see LICENSE.cache-tests)",',
  ' "suites": [']
suites.forEach((suite, i) => {
  const { tests, ...head } = suite
  out.push(`  ${JSON.stringify(head).slice(0, -1)}, "tests": [`)
  tests.forEach((t, j) => out.push(`   ${JSON.stringify(t)}${j < tests.length - 1 ? ',' : ''}`))
  out.push(`  ]}${i < suites.length - 1 ? ',' : ''}`)
})
out.push(' ]', '}')
console.log(out.join('\n'))
