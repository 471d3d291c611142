// Package owners walks a claim's owner chain to the object that consumes
// its address (a Machine, a Metal3Data, a VSphereVM), and names the
// claim's machine.
package owners
