const double = require('b');
const isNumber = require('is-number');
module.exports = (x) => (isNumber(x) ? double(x) : NaN);
