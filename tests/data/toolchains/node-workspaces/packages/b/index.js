module.exports = (x) => x * 2;
