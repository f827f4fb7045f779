import React from "react";
export function Button(props: {label: string}) { return <button>{props.label}</button>; }
export const Card = ({title}: {title: string}) => <div>{title}</div>;
class Panel extends React.Component { render() { return <div/>; } }
