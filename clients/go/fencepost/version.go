package fencepost

// Version is the fencepost release this client belongs to; it is versioned with the project
// (package.json "version"; the module is tagged clients/go/vVERSION).
const Version = "0.1.0"
