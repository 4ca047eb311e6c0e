// Package failpoint lets fault tests stop a program at a named point, e.g.
// between the MySQL commit and the Redis release. Failpoints exist only in
// binaries built with the "failpoints" build tag (the tests build theirs so);
// in every other build Inject compiles to nothing and the environment is
// never read. A failpoint only crashes: a lost answer is injected at the
// wire (internal/testkit/proxytest), on the path the real program takes.
package failpoint
