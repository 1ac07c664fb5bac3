// demo script 2 of 6: each is a separate request over the same HTTP/2 connection
window.h2gateDemo = window.h2gateDemo || [];
window.h2gateDemo.push(2);
