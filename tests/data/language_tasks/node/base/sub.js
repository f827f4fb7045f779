exports.sub = (a, b) => a + b;
