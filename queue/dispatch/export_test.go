package dispatch

// BatchPace is batchPace, for the tests of package dispatch_test.
const BatchPace = batchPace
